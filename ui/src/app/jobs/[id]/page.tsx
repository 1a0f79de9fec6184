import JobLog from '@/components/jobs/JobLog';

export const metadata = { title: 'Job · AI Toolkit' };

export default async function JobPage({ params }: { params: Promise<{ id: string }> }) {
  return <JobLog id={(await params).id} />;
}
