"""LTI 1.3 tool: platform registration, the tool's key pair and JWKS, OIDC login initiation and
resource link launches (issue 12, items 1 and 2).

Modules: `models` (tables and `LtiStore`, the one place that reads and writes them), `keys` (the
tool's RSA key pair and public JWKS), `launch` (pure checks of a launch's id_token and claims),
`routes` (`/lti/jwks`, `/lti/login`, `/lti/launch`, `/lti/landing`, `/lti/open`), `cli`
(`remat-judge lti register|list|remove`).

Specs followed: IMS LTI 1.3 Core (1EdTech, 2019), IMS Security Framework 1.0 (section 5.1.1:
third-party initiated login, authentication request and response, id_token validation).
"""
