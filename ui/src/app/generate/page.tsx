import GeneratePage from '@/components/generate/GeneratePage';

export const metadata = { title: 'Generate · AI Toolkit' };

export default async function Page({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const { job, model } = await searchParams;
  // ?model=<json>: a model picked on the Library page
  return <GeneratePage preferredJobId={typeof job === 'string' ? job : null} preferredModel={typeof model === 'string' ? model : null} />;
}
