"""The native API, one module-level `APIRouter` per concern; each handler finds the engine in
`request.app.state.engine` and the token check in `common.require_token` (the token is
`app.state.token`). `server.create_app` includes them, in this order:

- `health`: GET /health, GET /metrics
- `catalog`: what can run here: GET /models, POST /resolve, GET /inspect/{profile}, GET /loras, GET /library
- `generation`: a request's life: POST /generate, GET /stream/{request_id}, POST /cancel/{request_id}
- `queue`: GET /queue, POST /queue/{request_id}/move, POST /unload
- `files`: files in: POST /assets, POST /settings
- `results`: GET /results, the results feed (every request that ended, whoever asked)
- `downloads`: downloads a person asks for: POST /downloads, GET /downloads, DELETE /downloads/{id},
  POST /downloads/{id}/resume
- `preprocess`: control maps: POST /preprocess (the map of an image, to see before generating),
  GET /preprocessors
- `outputs`: GET /outputs/{relpath}, which the compat port serves too (compat/__init__.py), each port
  behind its own token check

`common` holds what they share: the token check, the `{detail, field}` error and its OpenAPI entries.
"""
