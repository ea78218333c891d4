package commands

// Practice is the few-shot examples use cases.
type Practice struct{ d Deps }

// NewPractice refuses missing dependencies.
func NewPractice(d Deps) (*Practice, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &Practice{d: d}, nil
}
