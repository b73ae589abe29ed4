"""Kafka Connect: connector configurations, their deployment, and the sensor that watches them."""
