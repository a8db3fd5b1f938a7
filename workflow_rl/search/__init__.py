"""The workflow search: GP-UCB over the 120 workflows, its executors, answer, report and ground truth."""
