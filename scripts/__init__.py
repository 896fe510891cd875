"""Developer tools of the project (not installed with the package): the Phoenix venv for the trace tests, the notebook
runner, and the re-recording of the scripted cassettes."""
