"""Submissions as the judge takes them in and shows them: the submission service (`submit`), its
admission control (`admission`) and ways to refuse (`refusal`, and the HTTP status of each:
`http_refusals`), the public view of a submission (`public`), the REST API's request and response
schemas (`schemas`) and the sender of API clients' verdict callbacks (`callback_sender`, on the
outbound machinery of `server.delivery`). The table and `SubmissionStore` are in
`server.store.submissions`."""
