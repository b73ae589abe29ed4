"""Kafka topics of the pipeline: explicit creation and the figures sensors observe."""
