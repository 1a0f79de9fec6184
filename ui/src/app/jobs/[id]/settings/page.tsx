import EngineSettingsPage from '@/components/jobs/EngineSettingsPage';

export const metadata = { title: 'Engine settings · AI Toolkit' };

export default async function Page({ params }: { params: Promise<{ id: string }> }) {
  return <EngineSettingsPage id={(await params).id} />;
}
