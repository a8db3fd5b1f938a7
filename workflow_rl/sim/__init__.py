"""The CAGE2 simulator: the rules as tables, written once, compiled for the CPU and for CUDA."""
