package commands

// Sessions is the practice sessions use cases (wired in service.New).
type Sessions struct{ d Deps }
