"""Developer tools of the project (not installed with the package): the interpreter the venv is made from, the
Phoenix venv for the trace tests, the notebook runner, the re-recording of the scripted cassettes, the calibration
study's run (its figures and tables for the docs) and the large evaluation file the streaming reader's tests and
benchmark read."""
