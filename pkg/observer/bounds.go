package observer

// maxReportBytes bounds a report as the observer writes it (JSON), with
// 50 samples and every string and number at its bound: 35,174 bytes
// measured (TestTheWorstReportIsBounded), 651 per sample (593 before the
// withdrawal: its state and a 12-digit figure). The API server adds its
// metadata (managedFields, uid, resourceVersion).
const maxReportBytes = 36 << 10

// maxWorstNote bounds the notes of the observer's events, every value at
// its bound: 930 bytes measured (TestEventNotes, failed and hung hooks
// mixed), so shutdownreport.MaxNoteLength never cuts.
const maxWorstNote = 960
