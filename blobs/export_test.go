package blobs

// SweepNextPage is the query of a Sweep's pages after its first.
const SweepNextPage = sweepNextPage
