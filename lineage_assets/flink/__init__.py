"""Flink: the datasets the streaming jobs produce (their deployment and job sensor come with the Flink jobs)."""
