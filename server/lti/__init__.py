"""LTI 1.3 tool: platform registration, the tool's key pair and JWKS, OIDC login initiation and
resource link launches, deep linking, grade passback and rosters.

Its tables and their stores are in `server.store` (`lti`, `lti_store`, `lti_launches`,
`lti_passback`). Modules: `keys` (the tool's RSA key pair and public JWKS), `launch` (pure checks
of a launch's id_token and claims), `routes` (`/lti/jwks`, `/lti/login`, `/lti/launch`,
`/lti/landing`, `/lti/open`), `service` (what the routes need, built once), `grade_sender`.

Specs followed: IMS LTI 1.3 Core (1EdTech, 2019), IMS Security Framework 1.0 (section 5.1.1:
third-party initiated login, authentication request and response, id_token validation).
"""
