"""obsgen: alerts and dashboards for large distributed training jobs, defined in Python."""
