package events

// registerOrganisations registers the events of organisations, partners and
// promotion requests.
func registerOrganisations(r *Registry) {}
