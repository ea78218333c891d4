package queries

// BetweenReads sets what k runs between reading a document's vectors and
// the texts of its hits.
func BetweenReads(k *KnowledgeSearch, f func()) { k.betweenReads = f }
