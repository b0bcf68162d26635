"""Problems as instructors add and study them: unpacking and installing a problem package
(`packages`), the upload flow that validates and publishes one (`uploads`), and a problem
version's submissions grouped into policy clusters (`clusters`). The uploads' table and
`UploadStore` are in `server.store.problems`."""
