"""Submissions as the judge takes them in and shows them: the submission service (`submit`), its
admission control (`admission`) and ways to refuse (`refusal`), the public view of a submission
(`public`) and the REST API's request and response schemas (`schemas`). The table and
`SubmissionStore` are in `server.store.submissions`."""
