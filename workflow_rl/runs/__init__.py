"""The runs layer: the train and search jobs, callable from Python, and the run-folder and engine rules they share."""
