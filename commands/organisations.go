package commands

// Organisations is the organisations, partners and promotion requests use cases.
type Organisations struct{ d Deps }
