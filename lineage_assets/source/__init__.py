"""The pipeline's source: the PostgreSQL orders table and the generator that fills it."""
