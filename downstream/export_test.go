package downstream

// SetBeforePublish makes every publish run f first, until the test ends.
func SetBeforePublish(f func()) (restore func()) {
	testHookBeforePublish = f
	return func() { testHookBeforePublish = nil }
}

// SetTrimBatch makes trim delete n messages a statement, until the test
// ends.
func SetTrimBatch(n int) (restore func()) {
	old := trimBatch
	trimBatch = n
	return func() { trimBatch = old }
}
