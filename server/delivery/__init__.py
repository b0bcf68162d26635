"""Outbound HTTP the judge makes on its own: signed verdict callbacks to API clients (`callbacks`:
HMAC, sending and backoff; `signing`; where a call may go, the SSRF checks: `targets`) and the one
loop that claims due rows and hands them to a pool of deliveries (`senders`). The senders built on
it live with what they send: `server.submissions.callback_sender` (API callbacks) and
`server.lti.grade_sender` (LMS grades). It imports nothing of submissions or LTI."""
