package projections

// OrganisationProjections project organisations, partners and promotion requests.
func OrganisationProjections() []Projection { return nil }
