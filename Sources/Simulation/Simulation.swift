// The Simulation module.
