package knowledge

// PDFTextAsync is PDFText with a channel closed once the extraction's
// goroutine has returned, for tests that check the work stops.
var PDFTextAsync = pdfTextAsync
