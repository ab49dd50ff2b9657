// The ExperimentServer module.
