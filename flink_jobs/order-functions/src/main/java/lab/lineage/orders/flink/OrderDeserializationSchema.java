package lab.lineage.orders.flink;

import java.io.IOException;
import lab.lineage.orders.DecodeSettings;
import lab.lineage.orders.DecodedOrder;
import lab.lineage.orders.OrderDecoder;
import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.api.common.typeinfo.TypeInformation;

/**
 * The Kafka source's value deserializer of supplier-stats: every record becomes a {@link DecodedOrder}, an order or a
 * reason, so a bad record never fails the source (and the watermark strategy in the source sees which is which).
 */
public class OrderDeserializationSchema implements DeserializationSchema<DecodedOrder> {
    private static final long serialVersionUID = 1L;

    private final DecodeSettings settings;
    private transient OrderDecoder decoder;

    public OrderDeserializationSchema(DecodeSettings settings) {
        this.settings = settings;
    }

    @Override
    public void open(InitializationContext context) {
        decoder = settings.newDecoder();
    }

    @Override
    public DecodedOrder deserialize(byte[] message) throws IOException {
        if (decoder == null) {
            decoder = settings.newDecoder();
        }
        return decoder.decode(message);
    }

    @Override
    public boolean isEndOfStream(DecodedOrder nextElement) {
        return false;
    }

    @Override
    public TypeInformation<DecodedOrder> getProducedType() {
        return TypeInformation.of(DecodedOrder.class);
    }
}
