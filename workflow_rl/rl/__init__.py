"""Training: the PPO agent, its memory, the trainer, compliance and evaluation, the planner, shipped agents."""
