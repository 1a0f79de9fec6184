import JobsTable from '@/components/jobs/JobsTable';

export const metadata = { title: 'Jobs · AI Toolkit' };

export default function JobsPage() {
  return (
    <>
      <h1>Jobs</h1>
      <JobsTable />
    </>
  );
}
