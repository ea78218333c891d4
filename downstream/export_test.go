package downstream

// SetBeforePublish makes every publish run f first, until the test ends.
func SetBeforePublish(f func()) (restore func()) {
	testHookBeforePublish = f
	return func() { testHookBeforePublish = nil }
}
