// The largest request body the UI takes: a grid PNG (POST /api/grids), or an input image or file
// forwarded to the engine (its MAX_ASSET_BYTES in extensions_built_in/inference_engine/routes/files.py, /assets and /settings). next.config.ts
// lets the request guard (src/proxy.ts) buffer a body this large whole; larger ones are refused.
export const MAX_UPLOAD_BYTES = 64 * 1024 * 1024;
