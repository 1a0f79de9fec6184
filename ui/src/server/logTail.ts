// The last lines of a job's log.txt without reading a huge file whole.
import fs from 'node:fs';
import path from 'node:path';
import { jobFolder } from './paths';

export function jobLogPath(jobName: string): string {
  return path.join(jobFolder(jobName), 'log.txt');
}

export function tailFile(file: string, maxLines: number, maxBytes = 256 * 1024): string {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return '';
  }
  try {
    const size = fs.fstatSync(fd).size;
    const len = Math.min(size, maxBytes);
    const buf = Buffer.alloc(len);
    fs.readSync(fd, buf, 0, len, size - len);
    // a progress bar rewrites its line with \r: keep what the terminal would show
    let lines = buf
      .toString('utf8')
      .split('\n')
      .map((l) => l.split('\r').filter((part) => part !== '').pop() ?? '');
    if (len < size) lines = lines.slice(1); // first line is probably cut
    while (lines.length && lines[lines.length - 1].trim() === '') lines.pop();
    return lines.slice(-maxLines).join('\n');
  } finally {
    fs.closeSync(fd);
  }
}
