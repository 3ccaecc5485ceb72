"""Switch conformance: cases as data (cases/*.yaml), a runner, and targets (model, model process, BMv2)."""
