package lab.lineage.connect.s3;

import java.time.Duration;

import org.apache.kafka.connect.errors.RetriableException;

import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.S3ClientBuilder;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;
import software.amazon.awssdk.services.s3.model.S3Exception;

/** {@link ObjectUploader} backed by AWS SDK v2 with the JDK HttpURLConnection transport. */
final class S3ObjectUploader implements ObjectUploader {

    static final String CONTENT_TYPE = "application/x-ndjson";

    private final S3Client client;
    private final String bucket;

    S3ObjectUploader(S3JsonLinesSinkConfig config) {
        this.bucket = config.bucket();
        this.client = buildClient(config);
    }

    static S3Client buildClient(S3JsonLinesSinkConfig config) {
        AwsCredentialsProvider credentials = config.accessKeyId().isPresent()
                ? StaticCredentialsProvider.create(AwsBasicCredentials.create(
                        config.accessKeyId().get(), config.secretAccessKey().orElseThrow()))
                : DefaultCredentialsProvider.builder().build();

        S3ClientBuilder builder = S3Client.builder()
                .httpClientBuilder(UrlConnectionHttpClient.builder()
                        .connectionTimeout(Duration.ofSeconds(10))
                        .socketTimeout(Duration.ofSeconds(60)))
                .region(Region.of(config.region()))
                .credentialsProvider(credentials)
                .forcePathStyle(config.pathStyleAccess())
                // SDK >= 2.30 adds CRC checksums to every PUT by default ("flexible checksums"); many
                // S3-compatible stores (s3proxy, older MinIO) reject or mis-handle them.
                .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
                .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED);
        config.endpoint().ifPresent(builder::endpointOverride);
        return builder.build();
    }

    @Override
    public void put(String key, byte[] body) {
        PutObjectRequest request = PutObjectRequest.builder()
                .bucket(bucket)
                .key(key)
                .contentType(CONTENT_TYPE)
                .contentLength((long) body.length)
                .build();
        try {
            client.putObject(request, RequestBody.fromBytes(body));
        } catch (S3Exception e) {
            // Includes 403/404 (bad credentials, missing bucket): retried too, since they are usually fixed
            // operationally (bucket created, credentials rotated) and failing the task would need a manual
            // restart. The message tells the operator what is wrong.
            throw new RetriableException("S3 PutObject s3://" + bucket + "/" + key + " failed: HTTP "
                    + e.statusCode() + " " + errorCode(e) + ": " + e.getMessage(), e);
        } catch (SdkClientException e) {
            throw new RetriableException("S3 PutObject s3://" + bucket + "/" + key
                    + " failed (client/network): " + e.getMessage(), e);
        } catch (SdkException e) {
            throw new RetriableException("S3 PutObject s3://" + bucket + "/" + key + " failed: "
                    + e.getMessage(), e);
        }
    }

    private static String errorCode(S3Exception e) {
        return e.awsErrorDetails() != null && e.awsErrorDetails().errorCode() != null
                ? e.awsErrorDetails().errorCode() : "";
    }

    @Override
    public void close() {
        client.close();
    }
}
