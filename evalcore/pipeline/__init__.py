"""The Ray Data pipeline: a list of stages from items to tables and a report."""
