"""Data conservation along the lineage: per hop (a job with its input and outputs), every record of the input
accounted for in its outputs, its dead letters or as still pending, with what is missing or doubled."""
