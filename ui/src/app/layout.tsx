import type { Metadata } from 'next';
import type { ReactNode } from 'react';
import AuthPrompt from '@/components/AuthPrompt';
import Sidebar from '@/components/Sidebar';
import './globals.css';

export const metadata: Metadata = {
  title: 'AI Toolkit',
  description: 'Local diffusion generation: jobs and the inference engine',
};

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <body>
        <div className="shell">
          <Sidebar />
          <main className="main">{children}</main>
        </div>
        <AuthPrompt />
      </body>
    </html>
  );
}
