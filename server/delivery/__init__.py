"""Outbound HTTP the judge makes on its own: signed verdict callbacks to API clients (`callbacks`:
HMAC, the SSRF checks, sending and backoff; `callback_sender`) and the one loop that claims due rows
and hands them to a pool of deliveries (`senders`), shared with the LMS grade sender."""
