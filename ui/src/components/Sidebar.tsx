'use client';
import Link from 'next/link';
import { usePathname } from 'next/navigation';

const LINKS = [
  { href: '/jobs', label: 'Jobs' },
  { href: '/generate', label: 'Generate' },
  { href: '/grid', label: 'Grid' },
  { href: '/library', label: 'Library' },
];

export default function Sidebar() {
  const pathname = usePathname();
  return (
    <nav className="sidebar" aria-label="Main">
      <div className="brand">AI Toolkit</div>
      {LINKS.map((l) => (
        <Link key={l.href} href={l.href} className={pathname?.startsWith(l.href) ? 'navlink active' : 'navlink'}>
          {l.label}
        </Link>
      ))}
    </nav>
  );
}
