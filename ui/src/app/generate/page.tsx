import GeneratePage from '@/components/generate/GeneratePage';

export const metadata = { title: 'Generate · AI Toolkit' };

export default async function Page({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const job = (await searchParams).job;
  return <GeneratePage preferredJobId={typeof job === 'string' ? job : null} />;
}
