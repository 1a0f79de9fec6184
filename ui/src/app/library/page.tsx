import LibraryPage from '@/components/library/LibraryPage';

export const metadata = { title: 'Library · AI Toolkit' };

export default async function Page({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const job = (await searchParams).job;
  return <LibraryPage preferredJobId={typeof job === 'string' ? job : null} />;
}
