import type { NextConfig } from 'next';
import { MAX_UPLOAD_BYTES } from './src/server/uploadLimits';

const nextConfig: NextConfig = {
  // better-sqlite3 is a native module: load it from node_modules at run time
  serverExternalPackages: ['better-sqlite3'],
  // the streaming proxy must never be compressed or buffered
  compress: false,
  poweredByHeader: false,
  experimental: {
    // src/proxy.ts makes Next buffer each request body (10 MB by default, past which it silently cuts
    // the body): the largest upload must arrive whole, and one byte more lets the route see it is over
    proxyClientMaxBodySize: MAX_UPLOAD_BYTES + 1,
  },
};

export default nextConfig;
