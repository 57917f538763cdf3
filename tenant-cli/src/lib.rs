//! `svc-cli`: the tenant's command line and typed API client for the v1 API.
