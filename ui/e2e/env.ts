// Where this e2e run keeps its DB and job folders (set by playwright.config.ts).
import path from 'node:path';

export const E2E_DIR = process.env.AITK_E2E_DIR as string;
export const DB_PATH = path.join(E2E_DIR, 'aitk_db.db');
export const TRAINING_FOLDER = path.join(E2E_DIR, 'output');
export const SCREENSHOTS = path.join(__dirname, '..', 'test-results', 'screenshots');
