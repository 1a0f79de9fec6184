import GridPage from '@/components/grid/GridPage';

export const metadata = { title: 'Grid · AI Toolkit' };

export default async function Page({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const job = (await searchParams).job;
  return <GridPage preferredJobId={typeof job === 'string' ? job : null} />;
}
