import type { NextConfig } from 'next';

const nextConfig: NextConfig = {
  // better-sqlite3 is a native module: load it from node_modules at run time
  serverExternalPackages: ['better-sqlite3'],
  // the streaming proxy must never be compressed or buffered
  compress: false,
  poweredByHeader: false,
};

export default nextConfig;
