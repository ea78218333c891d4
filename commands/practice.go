package commands

// Practice is the few-shot examples and practice sessions use cases.
type Practice struct{ d Deps }
